"""The instructor's own nbgrader settings: ``nbgrader_config.py`` (or ``.json``) in Jupyter's
config directories (``jupyter --paths``), read as nbgrader's own commands read them. The
course's settings (:mod:`.nbgrader_settings`) have none of these choices: the late-submission
penalty (:mod:`.late_penalty`) and a download-name pattern (:mod:`.collect`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.cli import one_line

from .errors import SetupError


def instructor_config() -> Any:
    """The instructor's nbgrader settings, merged as nbgrader merges them (a traitlets
    ``Config``); a file that cannot be read stops the command in one line."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import (
        ConfigFileNotFound,
        JSONFileConfigLoader,
        PyFileConfigLoader,
    )

    config = Config()
    for directory in reversed(jupyter_config_path()):  # the most important one merges last
        for loader in (JSONFileConfigLoader, PyFileConfigLoader):
            name = "nbgrader_config." + ("json" if loader is JSONFileConfigLoader else "py")
            try:
                config.merge(loader(name, path=directory).load_config())
            except ConfigFileNotFound:
                continue
            except Exception as error:  # noqa: BLE001 - the instructor's file, any mistake
                raise SetupError(
                    f"{Path(directory) / name}: {one_line(error)} "
                    "(fix or remove that file; nbgrader's own commands read it too)"
                ) from None
    return config
