"""``PollPass`` (tagpin.domain.poll_pass) over generated sequences of runs: the pass's start is its
first run's, kept while later runs continue it; a part is behind only in a run that continues a
pass, stops again, and comes an hour or more after the pass began."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tagpin.domain.channels import FollowedKey
from tagpin.domain.poll_pass import BEHIND_AFTER_MS, PollPass

KEYS = [FollowedKey(f"registry.example/team/app{i}:stable") for i in range(4)]
runs = st.lists(
    st.tuples(st.integers(0, 3 * BEHIND_AFTER_MS), st.sampled_from([None, *KEYS])), min_size=1, max_size=30
)


@given(runs)
def test_behind_means_a_continued_pass_stopped_again_an_hour_after_it_began(sequence: list) -> None:
    position, now, began = PollPass(), 0, None
    for gap, stopped in sequence:
        now += gap
        continued = position.cursor is not None
        began = began if continued else now  # a run from no cursor begins a pass
        assert position.behind(stopped, now + 1) == (
            continued and stopped is not None and now + 1 - began >= BEHIND_AFTER_MS
        )
        position = position.after(stopped, now)
        assert position == (PollPass() if stopped is None else PollPass(stopped, began))


def test_chunks_go_on_from_the_cursor_and_wrap_around() -> None:
    assert PollPass(KEYS[2], 0).chunks(KEYS[::-1], 3) == [[KEYS[2], KEYS[3], KEYS[0]], [KEYS[1]]]
    assert PollPass().chunks(KEYS, 4) == [KEYS]
