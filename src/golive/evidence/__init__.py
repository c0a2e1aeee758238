"""Evidence of the runtime chain: startup log, host GPUs and driver, serving container."""
