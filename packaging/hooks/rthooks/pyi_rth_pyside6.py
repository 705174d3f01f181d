# Replaces PyInstaller's run-time hook for PySide6, which imports QtCore at the start of every run
# of the bundle. With this one, a worker or a command loads no Qt, as from a Python install; the
# console still finds Qt's plugins in the bundle. (PySide6's wheels make Qt relocatable themselves,
# so the qt.conf that PyInstaller's hook would add is not needed.)
import os
import sys

os.environ["QT_PLUGIN_PATH"] = os.path.join(sys._MEIPASS, "PySide6", "Qt", "plugins")
