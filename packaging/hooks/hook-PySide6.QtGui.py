# Replaces PyInstaller's hook for PySide6.QtGui (hooks in this folder take precedence), to leave
# out the GTK3 platform theme. The bundle cannot ship GTK itself, so the plugin would only load
# against the target's GTK with the bundle's older GLib, Pango and Cairo; without it, Qt follows
# the desktop's light or dark preference through the XDG portal theme instead.
from PyInstaller.utils.hooks.qt import add_qt6_dependencies

hiddenimports, binaries, datas = add_qt6_dependencies(__file__)
binaries = [(src, dest) for src, dest in binaries if "libqgtk3" not in src]
