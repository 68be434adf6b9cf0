"""Core commands, one module each: doctor, map, restore, results (and run/report once the tracks exist)."""
