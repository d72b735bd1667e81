"""TiService's checks of its settings (a mixin: traitlets finds validators on every class of the MRO), and a Type
setting whose error says why its class cannot be imported."""

from __future__ import annotations

from traitlets import TraitError, Type, validate
from traitlets.utils.importstring import import_item


class SettingChecks:
    @validate("unix_uid_range")
    def _check_uids(self, proposal):
        first, last = proposal["value"]
        if not 0 < first <= last:
            raise TraitError("TiService.unix_uid_range must be [first, last] with 0 < first <= last")
        return proposal["value"]

    @validate("scheduler_max_share")
    def _check_share(self, proposal):
        if not 0 < proposal["value"] <= 1:
            raise TraitError("TiService.scheduler_max_share must be above 0 and at most 1")
        return proposal["value"]

    @validate("usage_settling_time", "usage_sample_interval", "usage_history_interval", "usage_history_retention")
    def _check_positive(self, proposal):
        if not proposal["value"] > 0:
            raise TraitError(f"TiService.{proposal['trait'].name} must be above 0 seconds")
        return proposal["value"]

    @validate("usage_device_weights")
    def _check_weights(self, proposal):
        for dtype, w in proposal["value"].items():
            if not isinstance(w, (int, float)) or not w > 0:
                raise TraitError(f"TiService.usage_device_weights[{dtype!r}] must be a number above 0")
        return proposal["value"]


class ImportedType(Type):
    """A Type whose error, when its class cannot be imported, says why (traitlets' own says only that it could
    not): a missing optional dependency names the extra to install."""

    def validate(self, obj, value):
        if isinstance(value, str):
            try:
                import_item(value)
            except ImportError as e:
                raise TraitError(f"{self.name}: {value} could not be imported ({e})") from e
        return super().validate(obj, value)
