"""Songs: MIDI files for the piano tasks."""
