"""No name is defined at the top of a module that nothing uses (scripts/dead_names.py, run by scripts/check)."""

from __future__ import annotations

from pathlib import Path

from scripts import dead_names


def test_the_code_has_no_dead_names(capsys) -> None:
    assert dead_names.main() == 0, capsys.readouterr().out


def test_the_check_sees_top_level_names_but_not_registered_ones(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "LIMIT = 3\ndef helper():\n    pass\n@register\ndef command():\n    pass\nclass Thing:\n    x = 1\n"
    )
    assert [n for n, _ in dead_names.definitions(sample)] == ["LIMIT", "helper", "Thing"]
