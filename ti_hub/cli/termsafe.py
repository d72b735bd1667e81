"""Untrusted text (a job's log) made safe to print on a terminal.

A job's output is written by whoever submitted the job. Printed raw, it could retitle the reader's terminal
(OSC 0/2), clear it (CSI 2J), move the cursor or overwrite a line with `\\r` to show lines the job never wrote,
write the clipboard (OSC 52), or reach the terminal through DCS/APC strings and 8-bit C1 controls. So what
`ti job logs` prints keeps only text, newlines and tabs (`--raw` prints the log as it is):

- ESC sequences are removed whole: CSI (`ESC [` ... final byte), the strings OSC, DCS, SOS, PM and APC
  (`ESC ] P X ^ _` ... BEL or ST), and two-character sequences (`ESC c`, `ESC 7`, `ESC ( B`); colours go too.
- The 8-bit C1 controls (U+0080-U+009F) go, and those that open a sequence (CSI U+009B, OSC U+009D, ...)
  take their sequence with them.
- Every other control character goes: `\\r`, backspace, BEL, NUL, DEL, ... A `\\r\\n` line end becomes `\\n`
  (the newline is kept); a lone `\\r` (a progress bar redrawing its line) is dropped, so the redrawn states
  follow each other on one line, where nothing can hide what came before.

A string (OSC, DCS, ...) ends at BEL, ST, CAN or SUB, and also at a newline, which is kept: an unterminated
one hides at most the rest of its line. A sequence is never buffered: between chunks only the kind of
sequence still open is kept, so a sequence split across chunks is removed whole and memory stays constant.
"""

from __future__ import annotations

import re

__all__ = ["ControlStripper", "strip_controls"]

# the states between characters: in text, after ESC, in ESC's intermediate bytes, in a CSI, in a string
_TEXT, _ESC, _ESC_INTER, _CSI, _STRING = range(5)

_PLAIN = re.compile(r"[^\x00-\x08\x0b-\x1f\x7f-\x9f]+")  # printable text, \t (0x09) and \n (0x0a)
_CSI_BODY = re.compile(r"[\x20-\x3f]*")  # parameter and intermediate bytes
_ESC_INTER_BODY = re.compile(r"[\x20-\x2f]*")
_STRING_END = re.compile(r"[\x07\x0a\x18\x1a\x1b\x9c]")  # BEL, newline, CAN, SUB, ESC (of ESC \), ST

# the characters that open a sequence in text (the others among the controls are dropped alone)
_OPENERS = {"\x1b": _ESC, "\x9b": _CSI, "\x90": _STRING, "\x98": _STRING, "\x9d": _STRING, "\x9e": _STRING,
            "\x9f": _STRING}
# after ESC: CSI, then OSC, DCS, SOS, PM, APC
_AFTER_ESC = {"[": _CSI, "]": _STRING, "P": _STRING, "X": _STRING, "^": _STRING, "_": _STRING}


def _final(c: str, low: int) -> bool:
    return low <= ord(c) <= 0x7E


class ControlStripper:
    """Strips control sequences from text that arrives in chunks: `feed(chunk)` returns what is safe to print.

    One stripper per stream (a followed log); a sequence still open at the end of the stream is dropped.
    """

    def __init__(self) -> None:
        self._state = _TEXT

    def feed(self, chunk: str) -> str:
        out: list[str] = []
        state, i, n = self._state, 0, len(chunk)
        while i < n:
            if state == _TEXT:
                m = _PLAIN.match(chunk, i)
                if m:
                    out.append(m.group())
                    i = m.end()
                    continue
                state = _OPENERS.get(chunk[i], _TEXT)  # a control: it opens a sequence or is dropped
                i += 1
            elif state == _ESC:
                c = chunk[i]
                if c in _AFTER_ESC:
                    state, i = _AFTER_ESC[c], i + 1
                elif "\x20" <= c <= "\x2f":
                    state, i = _ESC_INTER, i + 1
                elif _final(c, 0x30):  # ESC c, ESC 7, ESC \ ...
                    state, i = _TEXT, i + 1
                else:  # not a sequence: read the character as text (another ESC starts over)
                    state = _TEXT
            elif state in (_CSI, _ESC_INTER):
                body = (_CSI_BODY if state == _CSI else _ESC_INTER_BODY).match(chunk, i)
                i = body.end() if body else i  # (the pattern matches even nothing)
                if i < n:
                    if _final(chunk[i], 0x40 if state == _CSI else 0x30):
                        i += 1
                    state = _TEXT  # ended by its final byte, or broken off by anything else (read as text)
            else:  # _STRING: its payload is dropped up to the end
                m = _STRING_END.search(chunk, i)
                if m is None:
                    break
                i, c = m.end(), m.group()
                if c == "\x1b":
                    state = _ESC  # ESC \ (ST) ends it; any other ESC sequence ends it and is removed too
                else:
                    state = _TEXT
                    if c == "\n":
                        out.append(c)
        self._state = state
        return "".join(out)


def strip_controls(text: str) -> str:
    """`text` without escape sequences or control characters other than newline and tab."""
    return ControlStripper().feed(text)
