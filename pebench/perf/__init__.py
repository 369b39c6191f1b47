"""The cost room: bench (measured speed, memory and MFU) and estimate (a config's cost on paper)."""
