"""Arrays and numeric work buffers (task `array`, no model): no key is decided by a model."""
from __future__ import annotations

from ..family import Family

FAMILY = Family(name="array", model_free_tasks=("array",))
