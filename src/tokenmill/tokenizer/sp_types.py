"""The piece types of a SentencePiece model (``ModelProto.SentencePiece.Type``) and its space mark:
shared by the model reader (``sentencepiece``) and the compiled encoder (``sp_encoder``)."""

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
WS = "\u2581"  # ▁, how sentencepiece writes a space
