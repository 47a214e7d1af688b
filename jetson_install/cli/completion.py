"""Shell completion, click's own (https://click.palletsprojects.com/en/stable/shell-completion/):
`_JETSON_INSTALL_COMPLETE=bash_source jetson-install` prints the script a shell sources
(zsh_source, fish_source alike), and the script asks the tool for each completion. Loaded only
when that variable is set (cli/main.py): no other run imports it.

One change to click's bash completion: bash splits the word being completed at a colon
(`:` is in its COMP_WORDBREAKS), so `--root sample:<TAB>` reached click as `sample`, `:` and
the rest, and the sample roots never matched. The words are joined again here, and each answer
is given from after the last colon, the part bash replaces (as bash-completion's
`__ltrim_colon_completions` does: https://github.com/scop/bash-completion/blob/main/bash_completion).
"""

from __future__ import annotations

from typing import Any, List, Tuple

from click.shell_completion import BashComplete, CompletionItem, add_completion_class

__all__ = ["register"]


class _BashWithColons(BashComplete):
    """click's bash completion, with words bash split at a colon joined again."""

    _cut = ""  # the part of the word being completed that bash does not replace: up to its last colon

    def get_completion_args(self) -> Tuple[List[str], str]:
        args, incomplete = super().get_completion_args()
        words, split = _joined([*args, incomplete])
        if split and ":" in words[-1]:
            self._cut = words[-1][: words[-1].rindex(":") + 1]
        return words[:-1], words[-1]

    def format_completion(self, item: CompletionItem[Any]) -> str:
        if self._cut and item.type == "plain" and isinstance(item.value, str) and item.value.startswith(self._cut):
            item = CompletionItem(item.value[len(self._cut):], type=item.type, help=item.help)
        return super().format_completion(item)


def _joined(words: List[str]) -> Tuple[List[str], bool]:
    """`words` with each word of colons alone joined to the words on either side, and whether
    the last word was so joined. No argument of the tool is a colon alone."""
    joined: List[str] = []
    glue = split = False
    for word in words:
        if word and set(word) == {":"}:
            if joined:
                joined[-1] += word
            else:
                joined.append(word)
            glue = split = True
        elif glue:
            joined[-1] += word
            glue = False
        else:
            joined.append(word)
            split = False
    return joined or [""], split


def register() -> None:
    """Put the bash completion above in click's place for `bash_source` and `bash_complete`."""
    add_completion_class(_BashWithColons, name="bash")
