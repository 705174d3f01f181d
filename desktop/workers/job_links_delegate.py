"""Paints the jobs a worker runs as links ("2: 4f1c0a9e, 77b2d3c1, +3") and reports clicks."""

from __future__ import annotations

from PySide6.QtCore import QAbstractItemModel, QEvent, QModelIndex, QPersistentModelIndex, QRect, Qt, Signal
from PySide6.QtGui import QFont, QMouseEvent, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem

from jobdesk.console.workers.worker_table_model import JOBS_ROLE
from jobdesk.core.models import short_id

MAX_LINKS = 3  # links drawn per cell; the rest are counted


class JobLinksDelegate(QStyledItemDelegate):
    link_clicked = Signal(str)  # a job id

    def links(self, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> tuple[str, list[tuple[QRect, str]], str]:
        """Where each link goes in the cell: (prefix, [(rect, job id)], suffix)."""
        jobs: list[str] = index.data(JOBS_ROLE) or []
        rect: QRect = option.rect  # type: ignore[attr-defined]
        metrics = option.fontMetrics  # type: ignore[attr-defined]
        prefix = f"{len(jobs)}: " if jobs else "0"
        x = rect.x() + 4 + metrics.horizontalAdvance(prefix)
        placed = []
        for job_id in jobs[:MAX_LINKS]:
            width = metrics.horizontalAdvance(short_id(job_id))
            placed.append((QRect(x, rect.y(), width, rect.height()), job_id))
            x += width + metrics.horizontalAdvance(", ")
        suffix = f"+{len(jobs) - MAX_LINKS}" if len(jobs) > MAX_LINKS else ""
        return prefix, placed, suffix

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""  # type: ignore[attr-defined]
        style = opt.widget.style() if opt.widget is not None else QApplication.style()  # type: ignore[attr-defined]
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)  # type: ignore[attr-defined]
        prefix, placed, suffix = self.links(opt, index)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)  # type: ignore[attr-defined]
        palette: QPalette = opt.palette  # type: ignore[attr-defined]
        text_colour = palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        rect: QRect = opt.rect  # type: ignore[attr-defined]
        metrics = opt.fontMetrics  # type: ignore[attr-defined]
        align = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        plain_font = QFont(opt.font)  # type: ignore[attr-defined]
        link_font = QFont(plain_font)
        link_font.setUnderline(True)
        link_colour = text_colour if selected else palette.color(QPalette.ColorRole.Link)
        painter.save()
        painter.setClipRect(rect)

        def draw(text: str, at: QRect, link: bool = False) -> None:
            painter.setFont(link_font if link else plain_font)
            painter.setPen(link_colour if link else text_colour)
            painter.drawText(at, align, text)

        draw(prefix, rect.adjusted(4, 0, 0, 0))
        comma = metrics.horizontalAdvance(", ")
        for i, (link_rect, job_id) in enumerate(placed):
            draw(short_id(job_id), link_rect, link=True)
            if i < len(placed) - 1 or suffix:
                draw(",", QRect(link_rect.right() + 1, rect.y(), comma, rect.height()))
        if suffix:
            x = placed[-1][0].right() + 1 + comma
            draw(suffix, QRect(x, rect.y(), max(0, rect.right() - x), rect.height()))
        painter.restore()

    def editorEvent(self, event: QEvent, model: QAbstractItemModel,  # noqa: N802
                    option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> bool:
        if event.type() == QEvent.Type.MouseButtonRelease and isinstance(event, QMouseEvent) \
                and event.button() == Qt.MouseButton.LeftButton:
            point = event.position().toPoint()
            for rect, job_id in self.links(option, index)[1]:
                if rect.contains(point):
                    self.link_clicked.emit(job_id)
                    return True
        return super().editorEvent(event, model, option, index)
