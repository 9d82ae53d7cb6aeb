# Typed stubs of the part of APScheduler 3 that bot/scheduling uses (the package ships no types).
