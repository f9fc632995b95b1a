"""Real and project data: the item table and its checks, StereoSet, BBQ, the paper's released scores, downloads."""
