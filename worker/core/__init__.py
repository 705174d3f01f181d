"""Layer 0, the core: models, errors, settings, durations, the pure rules of statuses, input
validation and the processor API. No I/O here: it imports nothing from asyncpg or from the other
layers, so the console and any tool can use it on its own.
"""
