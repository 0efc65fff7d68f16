"""Print mode's permission denials: listed in the JSON result and on one stderr line, by the command line
against the fake Messages API."""

from __future__ import annotations


def test_print_mode_lists_permission_denials_in_the_json_result_and_one_stderr_line(
    fake_api, run_cli, project
):
    api = fake_api
    api.reply_tools(
        [
            ("Bash", {"command": "touch made.txt"}, "toolu_touch"),
            ("Read", {"file_path": str(project / "x.txt")}, "toolu_read"),
        ]
    )
    api.reply_text("I could not run it.")
    (project / "x.txt").write_text("x\n")
    res = run_cli(api, "-p", "make a file", "--output-format", "json")
    assert res.code == 0, res.stderr
    result = res.json()
    assert result["permission_denials"] == [
        {"tool_name": "Bash", "tool_use_id": "toolu_touch", "tool_input": {"command": "touch made.txt"}}
    ]
    [line] = [x for x in res.stderr.splitlines() if "Permission denied" in x]
    assert line.startswith("Permission denied for 1 tool call(s): Bash (")
    assert not (project / "made.txt").exists()

    api.reply_text("nothing to deny")
    clean = run_cli(api, "-p", "hello", "--output-format", "json")
    assert clean.json()["permission_denials"] == [] and "Permission denied" not in clean.stderr
    api.check()
