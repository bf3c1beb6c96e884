"""Finding what answers: one ranking over memories and turns, the route, profiles, similar notes, wake-up."""
