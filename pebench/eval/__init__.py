"""The evaluation room: evaluate (tasks on runs or outside models), scoring (windows, streams, spans), outside
models (hf) and export; the tasks are pebench.eval.tasks."""
