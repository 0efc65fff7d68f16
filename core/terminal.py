"""The one sanitizer for untrusted text on its way to a terminal: control characters made visible.

Model text, tool inputs and outputs, file names, hook output, settings values and error messages can
carry characters a terminal obeys instead of showing: ESC starts CSI/OSC sequences (move the cursor,
erase a line, set the window title, write the clipboard with OSC 52), C1 controls do the same in one
byte, CR and BS overwrite what is already shown, and bidi overrides or invisible format characters make
a line read differently from what it holds. A permission question that can be redrawn by the command it
asks about is worthless, so every front end passes such text through ``visible`` first; the only escape
sequences that reach the terminal are the ones our own renderer adds for styling.

Each dangerous character becomes its Python-style escape (``\\x1b``, ``\\u202e``), so the user sees that
it is there. Newlines and tabs are kept (unless ``one_line``), and so is the zero-width joiner that
emoji sequences need.
"""

from __future__ import annotations

import re

# C0 controls except tab and newline, DEL and the C1 controls; the Unicode format characters (Cf: bidi
# embeddings, overrides and isolates, zero-width and invisible characters, tags) except U+200D; the
# line and paragraph separators; lone surrogates (undecodable bytes kept by surrogateescape)
_UNSAFE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b\u200c\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_MULTI_LINE = re.compile(f"[{_UNSAFE}]")
_ONE_LINE = re.compile(f"[{_UNSAFE}\t\n]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, *, one_line: bool = False) -> str:
    """``text`` safe to print: every control or invisible format character shown as its escape.

    A CRLF line ending is an ordinary line end; a lone CR (which would overwrite the line) is shown.
    ``one_line``: newlines and tabs are escaped too, so the text stays on the line it is put on.
    """
    if one_line:
        return _ONE_LINE.sub(_escape, text)
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return _MULTI_LINE.sub(_escape, text)
