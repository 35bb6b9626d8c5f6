"""Tool calling shared by every env with tools: parsing the agent's calls and checking them against schemas."""
