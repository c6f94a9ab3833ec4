"""Go's text for strings, as Go webhooks print them into their answers.

Why: a message a Go webhook writes quotes strings with ``%q`` (``strconv.Quote``: printable
characters as they are, the rest escaped) and embeds JSON written by ``json.Marshal`` (``<``,
``>``, ``&``, U+2028 and U+2029 escaped); Python's ``json.dumps`` writes both differently, and a
user comparing answers, or the conformance runner, sees the difference.
"""

from __future__ import annotations

from typing import Final

__all__ = ["go_json_escapes", "go_quote"]

_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}
_HTML_ESCAPES: Final = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_quote(text: str) -> str:
    """``strconv.Quote`` (``%q``): printable characters as they are, the rest escaped as Go
    escapes them; a lone surrogate (which Go's JSON decoder replaces) as U+FFFD."""
    if text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # the common case (every object name), in one C pass: nothing to escape
    return _quote_each(text)


def _quote_each(text: str) -> str:
    out = ['"']
    for char in text:
        ch = "\ufffd" if "\ud800" <= char <= "\udfff" else char
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def go_json_escapes(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with ``json.Marshal``'s HTML-safe
    escapes: those characters occur in JSON text only inside strings."""
    for char, escape in _HTML_ESCAPES.items():
        text = text.replace(char, escape)
    return text
