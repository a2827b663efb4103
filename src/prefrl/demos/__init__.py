"""Learning from a few demonstrations: demos made (scripted, recorded, planned), imported and
checked; RFCL's reverse and forward curricula and its training loop."""
