"""What :meth:`VirtualMachine.profile` returns: the VM's counters as a dict, printed as a table."""


class Profile(dict):
    """The VM's counters, keyed as they always were (``profile["kernel_launches"]``,
    ``profile["instructions"]``, ``profile["scopes"]``, ...), that print as a table:
    ``print(profile)``, ``str(profile)`` or ``profile.table()`` (and the same in an
    interactive session). One row per instruction that was timed: its function,
    index, opcode and detail (the kernel of a ``call_kernel``), the times it ran and
    its total and mean microseconds (with ``profile=True``), its launches timed on
    the device, their total microseconds and share of the device's busy time (with
    ``kernel_times=True``); then the counters and bytes per scope. ``dict(profile)``
    is the plain dict."""

    def table(self):
        rows = list(self.get("instructions", []))
        lines = [f"profile: {self.get('kernel_launches', 0)} kernel launches, "
                 f"{self.get('device_allocations', 0)} device allocations "
                 f"({self.get('device_bytes_allocated', 0)} bytes, {self.get('svm_allocations', 0)} in shared "
                 f"virtual memory), {self.get('sub_buffers_created', 0)} tensor views created"]
        if rows:
            lines += _instruction_table(rows, self.get("device_busy_us", 0.0))
        else:
            lines.append("  no instruction timed (VirtualMachine(..., profile=True) times each instruction, "
                         "kernel_times=True each kernel on the device)")
        if any(r.get("device_count", 0) for r in rows):
            busy, span = self.get("device_busy_us", 0.0), self.get("device_span_us", 0.0)
            lines.append(f"  device: {busy:.1f} us in kernels, {span:.1f} us from the first kernel's start to the "
                         f"last one's end, {max(0.0, span - busy):.1f} us idle between kernels")
        lines.append(f"  programs: {self.get('programs_built', 0)} built from source, "
                     f"{self.get('programs_loaded', 0)} loaded from the disk cache")
        lines.append(f"  transfers: {self.get('host_to_device', 0)} host to device "
                     f"({self.get('host_to_device_bytes', 0)} bytes), {self.get('device_to_host', 0)} device to "
                     f"host ({self.get('device_to_host_bytes', 0)} bytes); constants: "
                     f"{self.get('constant_bytes', 0)} bytes")
        scopes = self.get("scopes", {})
        if scopes:
            lines.append("  bytes per scope:")
            width = max(len(name) for name in scopes)
            for name, s in scopes.items():
                capacity = ""
                if s.get("onchip"):
                    capacity = f"  capacity {s['capacity']}" + (" (emulated on-chip)" if s.get("emulated") else "")
                lines.append(f"    {name:<{width}}  in use {s['in_use']:>10}  peak {s['peak']:>10}  "
                             f"allocations {s['allocations']:>4}{capacity}")
        return "\n".join(lines)

    def __str__(self):
        return self.table()

    def __repr__(self):
        return self.table()


def _instruction_table(rows, busy_us):
    """The instruction rows as aligned columns: host times where counted, device times where timed."""
    host = any(r.get("count", 0) for r in rows)
    device = any(r.get("device_count", 0) for r in rows)
    nodes = any(r.get("nodes") for r in rows)  # the model's nodes a kernel came from, where the file names them
    header = ["function", "index", "instruction", "detail"]
    if host:
        header += ["count", "total us", "mean us"]
    if device:
        header += ["launches", "device us", "share"]
    if nodes:
        header.append("nodes")
    table = [header]
    for r in rows:
        cells = [r.get("function", ""), str(r.get("index", "")), r.get("op", ""), r.get("detail", "")]
        if host:
            count = r.get("count", 0)
            cells += [str(count), f"{r.get('total_us', 0.0):.1f}",
                      f"{r.get('total_us', 0.0) / count:.2f}" if count else "-"]
        if device:
            launches, us = r.get("device_count", 0), r.get("device_us", 0.0)
            cells += [str(launches), f"{us:.1f}" if launches else "-",
                      f"{100.0 * us / busy_us:.1f}%" if launches and busy_us > 0 else "-"]
        if nodes:
            named = r.get("nodes") or []
            cells.append(named if isinstance(named, str) else ", ".join(named))
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    left = {0, 2, 3, len(header) - 1} if nodes else {0, 2, 3}  # text columns; numbers align right
    out = []
    for row in table:
        cells = [c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        out.append("  " + "  ".join(cells).rstrip())
    return out
