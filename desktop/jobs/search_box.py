"""The job search box: a line edit that completes the search keys of `search_syntax` on the
word being typed, not on the whole text."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QStringListModel, Qt
from PySide6.QtWidgets import QCompleter, QLineEdit, QWidget

from jobdesk.console.jobs.search_syntax import INPUT_HELP, INPUT_KEY, KEYS, completions


class TermCompleter(QCompleter):
    """Completes the last word of the text, and puts the rest of the text back around it."""

    def __init__(self, edit: QLineEdit) -> None:
        super().__init__(edit)
        self._keys = QStringListModel(completions(), self)  # owned here, or Python would free it
        self.setModel(self._keys)
        self._edit = edit
        self.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setCompletionMode(QCompleter.CompletionMode.PopupCompletion)

    def splitPath(self, path: str) -> list[str]:  # noqa: N802
        word = path.rsplit(" ", 1)[-1]
        return [word] if word else ["\0"]  # an empty word offers nothing (no popup on a space)

    def pathFromIndex(self, index: QModelIndex | QPersistentModelIndex) -> str:  # noqa: N802
        head = self._edit.text().rsplit(" ", 1)
        before = head[0] + " " if len(head) == 2 else ""
        return before + str(index.data())


class SearchBox(QLineEdit):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText("search, or status:failed type:video.* pipeline:ID user:3 error:\"timeout\"")
        self.setToolTip("Free text searches id, type, error and input. Terms:\n"
                        + "\n".join(f"  {key}:  {what}" for key, what in [*KEYS.items(), (INPUT_KEY, INPUT_HELP)])
                        + "\nPress / to come here.")
        self.setClearButtonEnabled(True)
        self.completer_ = TermCompleter(self)
        self.setCompleter(self.completer_)
