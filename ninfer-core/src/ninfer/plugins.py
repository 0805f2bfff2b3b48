"""Plugin manager: entry points in group ``ninfer``, loaded lazily and once.

``NINFER_LOAD_PLUGINS`` (comma-separated distribution or entry-point names) restricts which
entry points load; an empty value loads none. A plugin that fails to import is recorded in
``broken_plugins`` and skipped, never fatal. ``NINFER_TRACE_HOOKS=1`` prints every hook call.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import traceback

import pluggy

from . import hookspecs

pm = pluggy.PluginManager("ninfer")
pm.add_hookspecs(hookspecs)

broken_plugins: list[dict] = []
_loaded = False


def _builtin_plugins():
    from .quant import plugin as quant_plugin
    from .reference import plugin as reference_plugin
    from .weights import plugin as weights_plugin

    return [("ninfer.reference", reference_plugin), ("ninfer.weights", weights_plugin),
            ("ninfer.quant", quant_plugin)]


def load_plugins() -> pluggy.PluginManager:
    """Load built-in plugins and entry points once; return the plugin manager."""
    global _loaded
    if _loaded:
        return pm
    _loaded = True
    for name, mod in _builtin_plugins():
        if not pm.is_registered(mod):
            pm.register(mod, name=name)
    allow = os.environ.get("NINFER_LOAD_PLUGINS")
    allowed = None if allow is None else {s.strip() for s in allow.split(",") if s.strip()}
    eps = list(importlib.metadata.entry_points(group="ninfer"))
    if allowed:
        known = {ep.name for ep in eps} | {ep.dist.name for ep in eps if ep.dist}
        unknown = sorted(allowed - known)
        if unknown:  # a typo would otherwise leave the plugin out silently
            sys.stderr.write(f"ninfer: NINFER_LOAD_PLUGINS names {', '.join(unknown)}, which no installed plugin is "
                             f"called; the installed ones are {', '.join(sorted(ep.name for ep in eps)) or 'none'}.\n")
    for ep in eps:
        dist = ep.dist.name if ep.dist else None
        if allowed is not None and ep.name not in allowed and dist not in allowed:
            continue
        if pm.get_plugin(ep.name) is not None:
            continue
        try:
            mod = ep.load()
        except Exception as e:  # a broken plugin is reported, never fatal
            broken_plugins.append({
                "name": ep.name, "distribution": dist, "error": f"{type(e).__name__}: {e}",
                "traceback": traceback.format_exc(),
            })
            continue
        pm.register(mod, name=ep.name)
        if ep.dist is not None:
            _dist_of[ep.name] = (ep.dist.name, ep.dist.version)
    pm.check_pending()
    if os.environ.get("NINFER_TRACE_HOOKS"):
        pm.trace.root.setwriter(lambda s: sys.stderr.write(s))
        pm.enable_tracing()
    return pm


_dist_of: dict[str, tuple[str, str]] = {}


def list_plugins() -> list[dict]:
    """Every loaded plugin: name, distribution, version and the hooks it implements."""
    load_plugins()
    from . import __version__

    out = []
    for plugin in pm.get_plugins():
        name = pm.get_name(plugin)
        dist, version = _dist_of.get(name, ("ninfer-core", __version__))
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        out.append({"name": name, "distribution": dist, "version": version, "hooks": hooks})
    for b in broken_plugins:
        out.append({"name": b["name"], "distribution": b["distribution"], "version": None,
                    "hooks": [], "error": b["error"]})
    return sorted(out, key=lambda p: p["name"])


def collect(hook_name: str) -> list:
    """Call a register-style hook and return everything registered, in call order."""
    load_plugins()
    items: list = []
    getattr(pm.hook, hook_name)(register=items.append)
    return items
