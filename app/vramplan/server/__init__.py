"""The hardened web server of `vramplan app`: Voila with a Host check, a queue of kernel starts,
culling guards and allocator settings (`voila_server`, run as `python -m
vramplan.server.voila_server`), the kernel queue and culler guards without a Voila import
(`serving_kernels`), and the debug memory census (`server_memory`). A stage of its own between
the page (`ui`) and the command line (`commands/app.py` starts it); imports nothing of it here,
so `import vramplan.server` pulls in no web framework."""
