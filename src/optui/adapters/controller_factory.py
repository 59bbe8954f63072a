"""The factory of server controllers: :func:`build_controller` picks the
:class:`~optui.adapters.controller.Controller` of a server's ``control`` (process, script,
systemd, none). Apart from :mod:`optui.adapters.controller` so that the systemd controller,
which builds on that module, is not imported back by it (no import circle)."""

from __future__ import annotations

from pathlib import Path

from optui.adapters.controller import Controller, ObservedController, ProcessController, ScriptController
from optui.adapters.controller_systemd import SystemdController
from optui.adapters.shell import LocalShell, Shell


def build_controller(name: str, cfg, state_dir: Path, shell: Shell | None = None) -> Controller:
    """The controller for a server's config (``cfg`` a :class:`optui.config.ServerConfig`),
    running its commands through ``shell`` (default: the local machine)."""
    shell = shell or LocalShell(cfg.host)
    if cfg.control == "process":
        return ProcessController(name, state_dir, cwd=cfg.cwd, env=cfg.env, log_file=cfg.log_file, shell=shell)
    if cfg.control == "script":
        return ScriptController(name, state_dir, cfg.script, cwd=cfg.cwd, env=cfg.env, log_file=cfg.log_file, shell=shell)
    if cfg.control == "systemd":
        return SystemdController(name, cfg.unit, state_dir, shell=shell, user=getattr(cfg, "systemd_user", False),
                                 cwd=cfg.cwd, env=cfg.env)
    return ObservedController(name)
