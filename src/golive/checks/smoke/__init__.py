"""The smoke family: post-start requests and the request classes; collectors send and save, judges
read the bundle.
"""
