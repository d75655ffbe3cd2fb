"""Synthesis: public prompts -> candidates -> private-model scoring -> preference pairs (post-processing only)."""  # noqa: E501
