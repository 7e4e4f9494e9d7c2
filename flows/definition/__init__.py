"""What a wizard is made of: a flow (steps, conditions, its template), a session's state, the
questions put to the user, and what goes into and comes out of the engine."""
