"""The red-team battery: exploit agents, the battery runner and the hackability matrix (the
whole catalogue: ``catalogue``)."""
