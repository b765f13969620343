"""A shared box, on the box: what runs as the user at every login and as root for them (see ``puffer_core.tank``)."""
