import av
import numpy as np
import pytest

from prefrl.render import write_video


def test_h264_yuv420p_faststart_mp4(tmp_path):
    frames = [np.full((48, 64, 3), i * 8, np.uint8) for i in range(20)]
    path = write_video(tmp_path / "clip.mp4", frames, fps=20)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert stream.codec_context.pix_fmt == "yuv420p"
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
    assert len(decoded) == 20 and decoded[0].shape == (48, 64, 3)
    assert abs(float(decoded[-1].mean()) - 19 * 8) < 3
    data = path.read_bytes()
    assert data.index(b"moov") < data.index(b"mdat")  # faststart: playable while loading


def test_odd_sizes_are_padded_to_even(tmp_path):
    path = write_video(tmp_path / "odd.mp4", [np.zeros((33, 51, 3), np.uint8)] * 3)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (52, 34)


@pytest.mark.parametrize(
    "frames, message",
    [
        ([], "no frames"),
        ([np.zeros((8, 8), np.uint8)], "RGB frames"),
        ([np.zeros((8, 8, 3), np.float32)], "uint8"),
        ([np.zeros((8, 8, 3), np.uint8), np.zeros((10, 8, 3), np.uint8)], "differs"),
    ],
)
def test_bad_frames_are_clear_errors_and_leave_no_file(tmp_path, frames, message):
    with pytest.raises(ValueError, match=message):
        write_video(tmp_path / "bad.mp4", frames)
    assert not (tmp_path / "bad.mp4").exists()
