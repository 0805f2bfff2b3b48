"""ninfer's built-in drafters, registered through the plugin hook like anyone's."""

import ninfer

__version__ = "0.1.0"


@ninfer.hookimpl
def ninfer_register_drafters(register):
    from .dflash import DFlashDrafter
    from .lookup import LookupDrafter
    from .mtp import MTPDrafter

    register(LookupDrafter)
    register(MTPDrafter)
    register(DFlashDrafter)
