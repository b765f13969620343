"""PufferTank's image: rendered from the plugins and the matrix, built in three layers, locked."""
