"""Former home of the GPU picker (kept for scripts that import it from here)."""
from .gpu_picker import GpuPicker, with_default_unit  # noqa: F401
from ..state.text import message_html  # noqa: F401
