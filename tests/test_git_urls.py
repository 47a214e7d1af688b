"""`git+URL@REF` is read one way everywhere (base/git_urls.py): the planner's extra, the
fixes' repository and the source's identity all split it with split_git_url."""

from __future__ import annotations

from typing import List
from hypothesis import event, given
from hypothesis import strategies as st

from jetson_install.base.git_urls import split_git_url

_NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
_REF = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789._/-", min_size=1, max_size=20).filter(
    lambda ref: not ref.startswith("/"))
_USER = st.one_of(st.just(""), _NAME.map(lambda name: f"{name}@"))


@given(st.sampled_from(["https", "http", "ssh", "file"]), _USER, _NAME, st.lists(_NAME, min_size=1, max_size=3),
       _REF)
def test_a_ref_after_the_path_is_split_off_and_a_user_before_it_is_not(
        scheme: str, user: str, host: str, path: List[str], ref: str) -> None:
    event(f"scheme {scheme}, user given: {bool(user)}")
    repository = f"{scheme}://{user}{host}/{'/'.join(path)}"
    assert split_git_url(f"git+{repository}@{ref}") == (repository, ref)
    assert split_git_url(f"git+{repository}") == (repository, None)


def test_a_user_name_alone_is_not_a_ref() -> None:
    assert split_git_url("git+https://token@example.invalid/OBLITERATUS.git") == (
        "https://token@example.invalid/OBLITERATUS.git", None)
