"""Kernel declarations. Each module defines ``KERNEL = kernelscope.spec.KernelSpec(...)``.

Adding a kernel means adding one module here; ``kernelscope.registry`` finds it, and it flows through
every workflow stage, the tests and the report.
"""
