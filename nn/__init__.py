"""tinytensor.nn: modules, layers, attention, losses."""
