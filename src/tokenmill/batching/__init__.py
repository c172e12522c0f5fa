"""batching"""
