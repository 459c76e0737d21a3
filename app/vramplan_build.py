"""Build helper (not installed): setuptools' editable installs skip `data-files`.

`pip install -e .` (what `make venv` and Binder's postBuild run) goes through setuptools'
`editable_wheel`, which asks the distribution for `has_data` instead of `has_data_files` and so
never copies the data files (pypa/setuptools#3399); a wheel does. The data files here are the
Voila template and the Jupyter server setting that let plain `voila` and Jupyter's Voila
extension serve the planner without any request outside the machine (pyproject.toml). The
editable install copies them as a wheel would: reinstall after editing the template.
"""
from setuptools.command.editable_wheel import editable_wheel


class EditableWheel(editable_wheel):
    def _run_install(self, category: str) -> None:
        super()._run_install(category)
        if category == "data" and self.distribution.has_data_files():
            self.run_command("install_data")  # a no-op where setuptools already ran it
