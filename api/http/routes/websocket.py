"""Placeholder: filled in by its own change."""

from fastapi import APIRouter

router = APIRouter()
