"""Study: the Red Queen. Examiner, Evaluator, FSRS scheduling over the review log, sessions, Red Queen rounds."""
