"""Helpers shared by test tiers (not fixtures: plain functions any conftest can call)."""
