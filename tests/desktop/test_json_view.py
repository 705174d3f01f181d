"""The detail pane's JSON view shows any JSON a job holds: result_data is not bound to an object
(a plain-SQL UPDATE may write a bare number), and a bare value is one row, not a crash."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from jobdesk.console.jobs.job_detail import JsonView


def rows(view: JsonView) -> list[tuple[str, str]]:
    root = view.tree.invisibleRootItem()
    return [(root.child(i).text(0), root.child(i).text(1)) for i in range(root.childCount())]


def test_objects_lists_and_bare_values(qapp: QApplication) -> None:
    view = JsonView()
    view.show_value({"total": 3, "items": [1, 2]})
    assert rows(view) == [("total", "3"), ("items", "[2 items]")]
    view.show_value([True, "x"])
    assert rows(view) == [("0", "true"), ("1", '"x"')]
    for bare, shown in ((42, "42"), ("done", '"done"'), (False, "false")):
        view.show_value(bare)
        assert rows(view) == [("(value)", shown)]
        assert view.raw.toPlainText() == shown
    view.show_value(None)
    assert rows(view) == [] and view.raw.toPlainText() == "(none)"
