# Run by IPython at the start of every kernel (and `ipython`) of a TiHub workspace: the spawner sets
# PYTHONSTARTUP to this file (ti_hub/spawner/mixin.py). IPython's InteractiveShellApp runs PYTHONSTARTUP in
# the user namespace (exec_PYTHONSTARTUP, on by default), so this file defines nothing that stays there.
# A plain `python` prompt runs it too: without IPython it does nothing. No docstring on purpose: it
# would become the notebook's __doc__.


def _ti_hub_autoload():
    try:
        ip = get_ipython()  # noqa: F821 - defined in IPython's user namespace
    except NameError:
        return
    if ip is None or "ti_hub.magics" in ip.extension_manager.loaded:
        return
    try:
        ip.extension_manager.load_extension("ti_hub.magics")
    except ImportError:  # an image without TiHub's package: no magics, no noise
        pass
    except Exception as e:  # noqa: BLE001 - a broken extension must not break the kernel's start
        import sys

        print(f"ti_hub.magics not loaded: {type(e).__name__}: {e}", file=sys.stderr)


_ti_hub_autoload()
del _ti_hub_autoload
