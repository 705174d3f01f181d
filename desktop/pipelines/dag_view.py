"""The DAG of one pipeline in a `QGraphicsView`: jobs as nodes laid out left to right.

Each node shows the job's type, its status as colour plus symbol, its attempts and how long it
ran (ticking while it runs). An edge runs from each job to the jobs that depend on it; a blue
dash-dotted edge runs from a durable processor to the child jobs it spawned. Wheel zooms,
dragging pans, F fits, C centres on what matters now, and "follow" keeps centring on it as the
pipeline moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from PySide6.QtCore import QPoint, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPalette,
    QPen,
    QPolygonF,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsScene,
    QGraphicsSceneContextMenuEvent,
    QGraphicsSceneMouseEvent,
    QGraphicsView,
    QStyleOptionGraphicsItem,
    QWidget,
)

from jobdesk.console.pipelines.dag_layout import NODE_H, NODE_W, layered_layout
from jobdesk.console.theme import STATUS_COLOURS, STATUS_SYMBOLS, status_label
from jobdesk.core.models import Status
from jobdesk.core.timefmt import span
from jobdesk.store.pipelines import GraphNode

# What "follow" and C centre on, most urgent first.
FOCUS_ORDER = (Status.IN_PROGRESS, Status.FAILED, Status.WAITING_APPROVAL)
MIN_SCALE, MAX_SCALE = 0.03, 3.0
DETAIL_LOD = 0.45  # below this zoom, nodes are drawn as coloured boxes without text
SPAWNED_COLOUR = "#3b82f6"  # the edge from a parent to a child job it spawned


def graph_parents(node: GraphNode) -> list[str]:
    """The jobs drawn left of `node`: those it depends on, then the job that spawned it."""
    if node.spawned_by is None or node.spawned_by in node.depends_on:
        return list(node.depends_on)
    return [*node.depends_on, node.spawned_by]


class NodeItem(QGraphicsItem):
    def __init__(self, node: GraphNode, view: DagView) -> None:
        super().__init__()
        self.node = node
        self._view = view
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setAcceptHoverEvents(False)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip(node.id if node.spawned_by is None else f"{node.id}\nspawned by {node.spawned_by}")

    def boundingRect(self) -> QRectF:  # noqa: N802
        return QRectF(-3, -3, NODE_W + 6, NODE_H + 6)

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        node = self.node
        colour = QColor(STATUS_COLOURS[node.status][0])
        palette = self._view.palette()
        rect = QRectF(0, 0, NODE_W, NODE_H)
        lod = option.levelOfDetailFromTransform(painter.worldTransform())  # type: ignore[attr-defined]
        selected = self.isSelected()
        if lod < DETAIL_LOD:
            painter.fillRect(rect, colour)
            if selected:
                painter.setPen(QPen(palette.color(QPalette.ColorRole.Highlight), 6))
                painter.drawRect(rect)
            return
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        border = palette.color(QPalette.ColorRole.Highlight) if selected else colour
        painter.setPen(QPen(border, 3 if selected else 1.5))
        painter.setBrush(palette.color(QPalette.ColorRole.Base))
        painter.drawRoundedRect(rect, 6, 6)
        # A status band on the left: colour, plus the symbol drawn on it.
        outline = QPainterPath()
        outline.addRoundedRect(rect, 6, 6)
        painter.save()
        painter.setClipPath(outline)
        painter.fillRect(QRectF(0, 0, 26, NODE_H), colour)
        painter.restore()
        painter.setPen(QColor(STATUS_COLOURS[node.status][1]))
        symbol_font = QFont(painter.font())
        symbol_font.setPointSizeF(symbol_font.pointSizeF() * 1.2)
        painter.setFont(symbol_font)
        painter.drawText(QRectF(0, 0, 26, NODE_H), int(Qt.AlignmentFlag.AlignCenter), STATUS_SYMBOLS[node.status])

        text = palette.color(QPalette.ColorRole.Text)
        muted = palette.color(QPalette.ColorRole.PlaceholderText)
        title = QFont(painter.font())
        title.setPointSizeF(self._view.font().pointSizeF())
        title.setBold(True)
        painter.setFont(title)
        painter.setPen(text)
        left, width = 34.0, NODE_W - 42
        painter.drawText(QRectF(left, 6, width, 18), int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                         QFontMetrics(title).elidedText(node.type, Qt.TextElideMode.ElideMiddle, int(width)))
        body = QFont(title)
        body.setBold(False)
        body.setPointSizeF(title.pointSizeF() * 0.9)
        painter.setFont(body)
        painter.setPen(colour.darker(130) if colour.lightness() > 150 else colour)
        painter.drawText(QRectF(left, 24, width, 16), int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                         status_label(node.status, symbol=False))
        painter.setPen(muted)
        painter.drawText(QRectF(left, 42, width, 16), int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                         self._facts())

    def _facts(self) -> str:
        node = self.node
        # Runs and retries apart: a durable job's suspensions are runs, not tries.
        tries = f"run {node.attempts}" if node.attempts else "not started"
        if node.retry_count:
            tries += f" ({node.retry_count} {'retry' if node.retry_count == 1 else 'retries'})"
        elapsed = node.elapsed_s(self._view.now)
        if elapsed is None:
            return tries
        return f"{tries} · {'running ' if node.status == Status.IN_PROGRESS else ''}{span(elapsed)}"

    def mouseDoubleClickEvent(self, event: QGraphicsSceneMouseEvent) -> None:  # noqa: N802
        self._view.node_activated.emit(self.node.id)
        event.accept()

    def contextMenuEvent(self, event: QGraphicsSceneContextMenuEvent) -> None:  # noqa: N802
        scene = self.scene()
        if scene is not None:
            scene.clearSelection()
        self.setSelected(True)
        self._view.context_requested.emit(self.node.id, event.screenPos())
        event.accept()


class EdgeLayer(QGraphicsItem):
    """Every edge of one style (colour, dashed or not) as one item: parent -> child curves through
    the layout's bend points, with arrowheads. One item, not one per edge, keeps a big pipeline
    quick to build and to draw."""

    def __init__(self, colour: QColor, dashed: bool, style: Qt.PenStyle = Qt.PenStyle.DashLine) -> None:
        super().__init__()
        self.lines = QPainterPath()
        self.heads = QPainterPath()
        self.pen = QPen(colour, 1.6)
        if dashed:
            self.pen.setStyle(style)
        self.colour = colour
        self.count = 0
        self.setZValue(-1)
        self._bounds = QRectF()

    def add(self, start: QPointF, end: QPointF, bends: Sequence[tuple[float, float]]) -> None:
        points = [start, *(QPointF(x, y) for x, y in bends), end]
        self.lines.moveTo(points[0])
        for a, b in zip(points, points[1:], strict=False):
            mid = (a.x() + b.x()) / 2
            self.lines.cubicTo(QPointF(mid, a.y()), QPointF(mid, b.y()), b)
        self.heads.addPolygon(QPolygonF([end, QPointF(end.x() - 9, end.y() - 4.5), QPointF(end.x() - 9, end.y() + 4.5),
                                         end]))
        self.count += 1

    def done(self) -> None:
        """Call once every edge is added."""
        self.prepareGeometryChange()
        self._bounds = self.lines.controlPointRect().united(self.heads.boundingRect()).adjusted(-2, -2, 2, 2)

    def boundingRect(self) -> QRectF:  # noqa: N802
        return self._bounds

    def paint(self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None) -> None:
        detailed = option.levelOfDetailFromTransform(painter.worldTransform()) >= DETAIL_LOD  # type: ignore[attr-defined]
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, detailed)
        painter.strokePath(self.lines, self.pen)
        painter.fillPath(self.heads, self.colour)


class DagView(QGraphicsView):
    node_clicked = Signal(str)  # a job id
    node_activated = Signal(str)  # double-click: a job id
    context_requested = Signal(str, QPoint)  # a job id and where to open the menu

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        scene = QGraphicsScene(self)
        self.setScene(scene)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)
        self.setViewportUpdateMode(QGraphicsView.ViewportUpdateMode.SmartViewportUpdate)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.scene().selectionChanged.connect(self._selection_changed)
        self.now = datetime.now(UTC)
        self.follow = False
        self.pipeline_id: str | None = None
        self.nodes: dict[str, NodeItem] = {}
        self.edges: list[tuple[str, str]] = []
        self.spawned_edges: list[tuple[str, str]] = []  # parent -> a child it spawned (also in `edges`)
        self._shape: tuple[tuple[str, ...], tuple[tuple[str, ...], ...]] | None = None
        self._bounds = QRectF()
        self.clock = QTimer(self, interval=1000)  # the running jobs' elapsed times
        self.clock.timeout.connect(self._tick)
        self.clock.start()

    # -- content ----------------------------------------------------------------------------

    def clear_graph(self) -> None:
        self.scene().clear()
        self.nodes, self.edges, self._shape, self.pipeline_id = {}, [], None, None
        self.spawned_edges = []
        self._bounds = QRectF()

    def set_graph(self, pipeline_id: str, nodes: Sequence[GraphNode]) -> None:
        """Show these jobs; a known pipeline whose shape did not change is updated in place."""
        self.now = datetime.now(UTC)
        shape = (tuple(n.id for n in nodes), tuple(tuple(graph_parents(n)) for n in nodes))
        new_pipeline = pipeline_id != self.pipeline_id
        if not new_pipeline and shape == self._shape:
            for node in nodes:
                item = self.nodes[node.id]
                if item.node != node:
                    item.node = node
                    item.update()
        else:
            selected = self.selected_job()
            self._rebuild(nodes)
            self._shape = shape
            if selected in self.nodes:
                self.nodes[selected].setSelected(True)
        self.pipeline_id = pipeline_id
        if new_pipeline:
            self.fit()
        elif self.follow:
            self.centre_on_focus()

    def _rebuild(self, nodes: Sequence[GraphNode]) -> None:
        scene = self.scene()
        scene.blockSignals(True)
        scene.clear()
        scene.blockSignals(False)
        layout = layered_layout([n.id for n in nodes], {n.id: graph_parents(n) for n in nodes})
        self.nodes = {}
        by_id = {n.id: n for n in nodes}
        for node in nodes:
            item = NodeItem(node, self)
            item.setPos(*layout.positions[node.id])
            scene.addItem(item)
            self.nodes[node.id] = item
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText)
        healthy = EdgeLayer(muted, dashed=False)
        broken = EdgeLayer(QColor(STATUS_COLOURS[Status.FAILED][0]), dashed=True)  # from a failed or cancelled job
        spawned = EdgeLayer(QColor(SPAWNED_COLOUR), dashed=True, style=Qt.PenStyle.DashDotLine)
        self.edges, self.spawned_edges = [], []
        for parent, child, bends in layout.edges:
            px, py = layout.positions[parent]
            cx, cy = layout.positions[child]
            if by_id[child].spawned_by == parent and parent not in by_id[child].depends_on:
                layer = spawned
                self.spawned_edges.append((parent, child))
            else:
                layer = broken if by_id[parent].status in (Status.FAILED, Status.CANCELLED) else healthy
            layer.add(QPointF(px + NODE_W, py + NODE_H / 2), QPointF(cx, cy + NODE_H / 2), bends)
            self.edges.append((parent, child))
        for layer in (healthy, broken, spawned):
            if layer.count:
                layer.done()
                scene.addItem(layer)
        xs = [x for x, _ in layout.positions.values()] or [0.0]
        ys = [y for _, y in layout.positions.values()] or [0.0]
        self._bounds = QRectF(min(xs), min(ys), max(xs) - min(xs) + NODE_W, max(ys) - min(ys) + NODE_H)
        scene.setSceneRect(self._bounds.adjusted(-40, -40, 40, 40))

    # -- navigation -------------------------------------------------------------------------

    def fit(self) -> None:
        rect = self._bounds
        if not self.nodes or rect.isEmpty():
            return
        self.fitInView(self.sceneRect(), Qt.AspectRatioMode.KeepAspectRatio)  # the nodes and their margin
        scale = self.transform().m11()
        if scale > 1.0:  # a small pipeline is shown at its natural size, not blown up
            self.resetTransform()
            self.centerOn(rect.center())
        elif scale < MIN_SCALE:
            self.resetTransform()
            self.scale(MIN_SCALE, MIN_SCALE)

    def focus_node(self) -> NodeItem | None:
        for status in FOCUS_ORDER:
            for item in self.nodes.values():
                if item.node.status == status:
                    return item
        return None

    def centre_on_focus(self) -> None:
        item = self.focus_node()
        if item is not None:
            self.centerOn(item)

    def set_follow(self, follow: bool) -> None:
        self.follow = follow
        if follow:
            self.centre_on_focus()

    def zoom(self, factor: float) -> None:
        scale = self.transform().m11()
        factor = max(MIN_SCALE / scale, min(MAX_SCALE / scale, factor))
        self.scale(factor, factor)

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        super().mouseReleaseEvent(event)
        event.accept()  # the release ends a drag to pan: it is ours, even over the background

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802
        steps = event.angleDelta().y() / 120
        if steps:
            self.zoom(1.15 ** steps)
        event.accept()

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802
        key = event.key()
        if key == Qt.Key.Key_F:
            self.fit()
        elif key == Qt.Key.Key_C:
            self.centre_on_focus()
        elif key in (Qt.Key.Key_Plus, Qt.Key.Key_Equal):
            self.zoom(1.25)
        elif key == Qt.Key.Key_Minus:
            self.zoom(0.8)
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    # -- selection --------------------------------------------------------------------------

    def selected_job(self) -> str | None:
        items = [i for i in self.scene().selectedItems() if isinstance(i, NodeItem)]
        return items[0].node.id if len(items) == 1 else None

    def select_job(self, job_id: str) -> None:
        item = self.nodes.get(job_id)
        if item is not None:
            self.scene().clearSelection()
            item.setSelected(True)
            self.ensureVisible(item)

    def _selection_changed(self) -> None:
        job_id = self.selected_job()
        if job_id is not None:
            self.node_clicked.emit(job_id)

    def _tick(self) -> None:
        self.now = datetime.now(UTC)
        for item in self.nodes.values():
            if item.node.status == Status.IN_PROGRESS:
                item.update()
