"""Progress bars stay silent for fast work and appear for slow work."""

import cascader.progress as progress_module
from cascader.progress import progress


def test_fast_work_prints_nothing(capsys):
    assert list(progress(range(5), desc="fast")) == [0, 1, 2, 3, 4]
    assert capsys.readouterr().err == ""


def test_slow_work_shows_a_bar(capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "SHOW_AFTER_SECONDS", 0.0)
    bar = progress(total=3, desc="slow", unit="stage")
    bar.update()
    bar.set_description("later")
    bar.update(2)
    assert bar._bar.n == 3  # the bar made at the first update counts on from there
    bar.close()
    err = capsys.readouterr().err
    assert "slow:  33%" in err and "later:" in err
    assert capsys.readouterr().err == ""
    silent = progress(total=3, enabled=False)
    silent.update(3)
    silent.close()
    assert capsys.readouterr().err == ""
