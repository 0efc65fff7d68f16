"""Where the subcommand is in CLIs that take global options before it (``git -C . push``, ``kubectl -n prod
delete``, ``npm --prefix . publish``), so a rule like ``Bash(git push:*)`` is matched after them.

Each table lists the options a program accepts before its subcommand: the ones followed by a value and the
flags. An option not in the table (an abbreviation included) means the subcommand can't be told; the
permission check then fails closed under a deny rule for that program. ``quiet`` options only change how
output looks, so an allow rule sees past them too (``git --no-pager log`` under ``Bash(git log:*)``). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class _Globals:
    valued: frozenset[str]
    flags: frozenset[str]
    quiet: frozenset[str] = frozenset()  # flags that only change output: allow rules see past them
    first_word: str = ""  # a leading word form taken as an option ("+nightly" for cargo)


def _o(text: str) -> frozenset[str]:
    return frozenset(text.split())


_KUBE = _o(
    "-n --namespace --context --cluster --user --kubeconfig -s --server --token --as --as-group --as-uid "
    "--certificate-authority --client-certificate --client-key --cache-dir --request-timeout "
    "--tls-server-name -v --v --vmodule --log-file --profile --profile-output"
)
_TABLES: dict[str, _Globals] = {
    # git(1): options before the command
    "git": _Globals(
        _o("-C -c --git-dir --work-tree --namespace --config-env --super-prefix --list-cmds --exec-path"),
        _o(
            "-p --paginate -P --no-pager --no-replace-objects --no-lazy-fetch --bare --literal-pathspecs "
            "--glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --no-advice"
        ),
        quiet=_o("-P --no-pager --no-optional-locks --no-advice --literal-pathspecs"),
    ),
    "kubectl": _Globals(_KUBE, _o("--insecure-skip-tls-verify --match-server-version --warnings-as-errors")),
    "oc": _Globals(_KUBE, _o("--insecure-skip-tls-verify --match-server-version")),
    "helm": _Globals(
        _o(
            "-n --namespace --kube-context --kubeconfig --registry-config --repository-cache "
            "--repository-config --burst-limit --kube-apiserver --kube-as-group --kube-as-user "
            "--kube-ca-file --kube-tls-server-name --kube-token --qps"
        ),
        _o("--debug --kube-insecure-skip-tls-verify"),
    ),
    "npm": _Globals(
        _o("--prefix -C --registry -w --workspace --loglevel --userconfig --globalconfig --cache"),
        _o("-g --global --workspaces -s --silent -q --quiet -d --verbose -y --yes --json --offline"),
        quiet=_o("-s --silent -q --quiet"),
    ),
    "pnpm": _Globals(
        _o("-C --dir --filter -F --reporter --loglevel --workspace-dir"),
        _o("-w --workspace-root -r --recursive -s --silent --stream --parallel --aggregate-output"),
        quiet=_o("-s --silent"),
    ),
    "yarn": _Globals(
        _o("--cwd --cache-folder --modules-folder --registry --mutex --network-timeout"),
        _o("-s --silent --verbose --offline --json --non-interactive --no-progress --frozen-lockfile"),
        quiet=_o("-s --silent --no-progress"),
    ),
    "docker": _Globals(
        _o("-c --context -H --host --config -l --log-level --tlscacert --tlscert --tlskey"),
        _o("-D --debug --tls --tlsverify"),
    ),
    "podman": _Globals(
        _o("-c --connection --url --identity --root --runroot --log-level --storage-driver --cgroup-manager"),
        _o("-r --remote --syslog"),
    ),
    "cargo": _Globals(
        _o("-C --config -Z --color"),
        _o("-v -vv --verbose -q --quiet --frozen --locked --offline"),
        quiet=_o("-q --quiet"),
        first_word="+",
    ),
    "go": _Globals(_o("-C"), frozenset()),
    "pip": _Globals(
        _o(
            "--python --log --proxy --retries --timeout --exists-action --trusted-host --cert --client-cert "
            "--cache-dir --use-feature --use-deprecated"
        ),
        _o(
            "-v --verbose -q --quiet --isolated --require-virtualenv --no-input --no-cache-dir "
            "--disable-pip-version-check --no-color --no-python-version-warning"
        ),
        quiet=_o("-q --quiet --no-color --disable-pip-version-check"),
    ),
    "gh": _Globals(_o("-R --repo"), frozenset()),
    "terraform": _Globals(_o("-chdir"), frozenset()),
    "tofu": _Globals(_o("-chdir"), frozenset()),
    "poetry": _Globals(
        _o("-C --directory -P --project"),
        _o("-q --quiet -v -vv -vvv --verbose -n --no-interaction --ansi --no-ansi --no-plugins --no-cache"),
        quiet=_o("-q --quiet -n --no-interaction --no-ansi"),
    ),
    "uv": _Globals(
        _o("--directory --project --cache-dir --color --config-file --python"),
        _o("-q --quiet -v --verbose --offline --no-cache --native-tls --preview --no-progress"),
        quiet=_o("-q --quiet --no-progress"),
    ),
    "aws": _Globals(
        _o("--profile --region --output --endpoint-url --query --color --cli-read-timeout --ca-bundle"),
        _o("--debug --no-verify-ssl --no-paginate --no-sign-request --no-cli-pager"),
        quiet=_o("--no-cli-pager --no-paginate"),
    ),
    "systemctl": _Globals(
        _o("-H --host -M --machine -t --type --state -p --property --signal --kill-whom"),
        _o("--user --system --global -q --quiet --no-pager --no-block --now -f --force --runtime -a --all"),
        quiet=_o("-q --quiet --no-pager"),
    ),
    "apt-get": _Globals(
        _o("-o -c -t --target-release"), _o("-y --yes -q -qq -s --simulate --no-install-recommends")
    ),
    "apt": _Globals(
        _o("-o -c -t --target-release"), _o("-y --yes -q -qq -s --simulate --no-install-recommends")
    ),
}
_HELP = _o("-h --help --version -V -version -help")


@dataclass(frozen=True)
class Subcommand:
    """Where the subcommand of ``values`` is, past the program's global options."""

    index: int | None  # None: no subcommand (only options), or it can't be told
    unknown: str | None = None  # an option the table doesn't know: what follows can't be told
    quiet: bool = True  # every option skipped only changes output


def has_globals(program: str) -> bool:
    return program in _TABLES


def find(values: Sequence[str | None]) -> Subcommand | None:
    """The subcommand position for a program with a table (None for other programs). ``values[0]`` is
    the program as written; ``None`` is a word with an expansion."""
    table = _TABLES.get((values[0] or "").rsplit("/", 1)[-1])
    if table is None:
        return None
    i, quiet = 1, True
    while i < len(values):
        word = values[i]
        if word is None:
            return Subcommand(None, "a word before the subcommand comes from an expansion", False)
        if table.first_word and i == 1 and word.startswith(table.first_word):
            i, quiet = i + 1, False
            continue
        if not word.startswith("-") or word == "-":
            return Subcommand(i, None, quiet)
        if word == "--" or word in _HELP:
            return Subcommand(None)
        option, eq, _ = word.partition("=")
        short_attached = len(word) > 2 and not word.startswith("--") and word[:2] in table.valued
        if option in table.valued or short_attached:
            i += 1 if eq or short_attached else 2
            quiet = False
        elif option in table.flags and not eq:
            quiet = quiet and option in table.quiet
            i += 1
        else:
            return Subcommand(None, f"the option {word} before the subcommand is unknown here", False)
    return Subcommand(None, None, quiet)
