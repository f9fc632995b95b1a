"""Real and project data: the item table and its checks, language names, codes and scripts, StereoSet, BBQ, the
paper's released scores, downloads."""
